//! Accelerators on this machine, for the fit label: NVIDIA GPUs from `nvidia-smi
//! --query-gpu` when it is on the children's `PATH` (run like every child, through the
//! launcher: shim, ledger, allowlisted environment; 5 s at most), else the driver's
//! `/proc/driver/nvidia/gpus/*/information` (names only: it reports no memory); AMD GPUs
//! from `/sys/class/drm/card*/device/mem_info_vram_total` and `mem_info_vram_used`. None of
//! them: CPU only. What was found is kept for 10 s (free memory changes as models load).
//!
//! Tests point `nvidia-smi` at a script that prints its CSV, and the sysfs and procfs roots
//! at directories of their own (`[testing] accelerator_roots`); the code is the same.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use toolvisor_kit::launch::Launcher;
use toolvisor_protocol::results::{self, AcceleratorKind};

/// How long a detection is reused.
const FRESH: Duration = Duration::from_secs(10);
/// How long `nvidia-smi` may take.
const SMI_TIMEOUT: Duration = Duration::from_secs(5);

/// One accelerator and its memory (bytes; `None` where the source does not say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accelerator {
    pub kind: AcceleratorKind,
    pub name: String,
    pub memory_total: Option<u64>,
    pub memory_free: Option<u64>,
}

impl Accelerator {
    /// As results show it (`memory_used_bytes` is the inference pool's to add).
    pub fn shown(&self) -> results::Accelerator {
        results::Accelerator {
            kind: self.kind,
            name: self.name.clone(),
            memory_total_bytes: self.memory_total,
            memory_free_bytes: self.memory_free,
            memory_used_bytes: None,
        }
    }
}

/// Where accelerators are looked for.
#[derive(Debug)]
pub struct Probe {
    launcher: Option<Launcher>,
    /// `/sys/class/drm`.
    drm: PathBuf,
    /// `/proc/driver/nvidia/gpus`.
    nvidia_proc: PathBuf,
    last: Mutex<Option<(Instant, Vec<Accelerator>)>>,
}

impl Probe {
    /// A probe of this machine; `roots` (tests) replaces `/sys/class/drm` and
    /// `/proc/driver/nvidia/gpus` with `<roots>/drm` and `<roots>/nvidia`.
    pub fn new(launcher: Option<Launcher>, roots: Option<&Path>) -> Probe {
        let (drm, nvidia_proc) = match roots {
            Some(r) => (r.join("drm"), r.join("nvidia")),
            None => (
                PathBuf::from("/sys/class/drm"),
                PathBuf::from("/proc/driver/nvidia/gpus"),
            ),
        };
        Probe {
            launcher,
            drm,
            nvidia_proc,
            last: Mutex::new(None),
        }
    }

    /// The accelerators found (empty: CPU only), at most [`FRESH`] old.
    pub async fn detect(&self) -> Vec<Accelerator> {
        if let Some((at, found)) = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
            && at.elapsed() < FRESH
        {
            return found;
        }
        let mut found = match self.nvidia_smi().await {
            Some(gpus) => gpus,
            None => nvidia_proc(&self.nvidia_proc),
        };
        found.extend(amd_sysfs(&self.drm));
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), found.clone()));
        found
    }

    /// `nvidia-smi`'s GPUs, or `None` when it is not on the children's `PATH`, cannot run or
    /// answers nothing readable (then the driver's files are read).
    async fn nvidia_smi(&self) -> Option<Vec<Accelerator>> {
        let launcher = self.launcher.as_ref()?;
        if !launcher.finds("nvidia-smi") {
            return None;
        }
        let args = [
            "--query-gpu=name,memory.total,memory.free",
            "--format=csv,noheader,nounits",
        ]
        .map(String::from);
        let spec = launcher.spec(
            "nvidia-smi",
            &args,
            Path::new("/"),
            false,
            "models/nvidia-smi",
        );
        let run = async {
            let spawned = toolvisor_kit::process::spawn(spec).await.ok()?;
            let _guard = spawned.guard;
            let mut out = Vec::new();
            let mut stdout = spawned.stdout;
            let mut limited = (&mut stdout).take(64 * 1024);
            let _ = limited.read_to_end(&mut out).await;
            let mut exit = spawned.exit;
            let status = exit.wait_for(|s| s.is_some()).await.ok().and_then(|s| *s)?;
            status
                .success()
                .then(|| String::from_utf8_lossy(&out).into_owned())
        };
        match tokio::time::timeout(SMI_TIMEOUT, run).await {
            Ok(Some(text)) => {
                let gpus = parse_smi(&text);
                (!gpus.is_empty()).then_some(gpus)
            }
            Ok(None) => None,
            Err(_) => {
                tracing::warn!("nvidia-smi did not answer within 5 s; reading the driver's files");
                None
            }
        }
    }
}

/// `nvidia-smi --query-gpu=name,memory.total,memory.free --format=csv,noheader,nounits`:
/// one line per GPU, memory in MiB.
pub fn parse_smi(text: &str) -> Vec<Accelerator> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.rsplitn(3, ',').map(str::trim);
            let free: u64 = fields.next()?.parse().ok()?;
            let total: u64 = fields.next()?.parse().ok()?;
            let name = fields.next()?.to_string();
            (!name.is_empty()).then(|| Accelerator {
                kind: AcceleratorKind::Nvidia,
                name,
                memory_total: Some(total * 1024 * 1024),
                memory_free: Some(free * 1024 * 1024),
            })
        })
        .collect()
}

/// The driver's GPUs (`<dir>/<bus id>/information`, a `Model:` line each), without memory.
fn nvidia_proc(dir: &Path) -> Vec<Accelerator> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Accelerator> = entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("information")).ok())
        .filter_map(|text| {
            let model = text
                .lines()
                .find_map(|l| l.strip_prefix("Model:"))?
                .trim()
                .to_string();
            Some(Accelerator {
                kind: AcceleratorKind::Nvidia,
                name: model,
                memory_total: None,
                memory_free: None,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// AMD GPUs: every `card<N>` (not its connectors, `card0-DP-1`) whose device reports VRAM.
fn amd_sysfs(drm: &Path) -> Vec<Accelerator> {
    let Ok(entries) = std::fs::read_dir(drm) else {
        return Vec::new();
    };
    let mut cards: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n = name.strip_prefix("card")?;
            n.chars()
                .all(|c| c.is_ascii_digit())
                .then(|| (name, e.path()))
        })
        .collect();
    cards.sort();
    let number =
        |p: PathBuf| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    cards
        .into_iter()
        .filter_map(|(card, path)| {
            let device = path.join("device");
            let total = number(device.join("mem_info_vram_total"))?;
            let used = number(device.join("mem_info_vram_used"));
            let name = std::fs::read_to_string(device.join("product_name"))
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("AMD GPU ({card})"));
            Some(Accelerator {
                kind: AcceleratorKind::Amd,
                name,
                memory_total: Some(total),
                memory_free: used.map(|u| total.saturating_sub(u)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_csv_in_mebibytes() {
        let gpus = parse_smi(
            "NVIDIA GeForce RTX 4090, 24564, 23012\nNVIDIA A100-SXM4-80GB, 81920, 81000\n\ngarbage\n",
        );
        assert_eq!(gpus.len(), 2, "{gpus:?}");
        assert_eq!(gpus[0].name, "NVIDIA GeForce RTX 4090");
        assert_eq!(gpus[0].memory_total, Some(24564 * 1024 * 1024));
        assert_eq!(gpus[1].memory_free, Some(81000 * 1024 * 1024));
        // A name with a comma keeps it.
        assert_eq!(parse_smi("Tesla, rev 2, 100, 50")[0].name, "Tesla, rev 2");
    }

    #[test]
    fn amd_and_the_nvidia_driver_are_read_from_their_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("drm/card1/device");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(tmp.path().join("drm/card1-DP-1")).unwrap();
        std::fs::write(dev.join("mem_info_vram_total"), "17163091968\n").unwrap();
        std::fs::write(dev.join("mem_info_vram_used"), "163091968\n").unwrap();
        let amd = amd_sysfs(&tmp.path().join("drm"));
        assert_eq!(
            amd,
            vec![Accelerator {
                kind: AcceleratorKind::Amd,
                name: "AMD GPU (card1)".into(),
                memory_total: Some(17_163_091_968),
                memory_free: Some(17_000_000_000),
            }]
        );
        let gpu = tmp.path().join("nvidia/0000:01:00.0");
        std::fs::create_dir_all(&gpu).unwrap();
        std::fs::write(gpu.join("information"), "Model: \t NVIDIA L4\nIRQ: 42\n").unwrap();
        let nv = nvidia_proc(&tmp.path().join("nvidia"));
        assert_eq!(nv[0].name, "NVIDIA L4");
        assert_eq!(nv[0].memory_total, None);
    }
}
