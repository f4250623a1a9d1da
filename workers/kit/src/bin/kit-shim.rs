//! A minimal binary that runs the process shim, so the kit's tests exercise `shim_main` out of process.

fn main() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(mode) if mode == toolvisor_kit::process::SHIM_ARG => {
            toolvisor_kit::process::shim_main(args.collect())
        }
        _ => {
            eprintln!("usage: toolvisor-kit-shim __shim <program> [args..]");
            std::process::exit(2);
        }
    }
}
