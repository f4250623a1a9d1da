//! `toolvisor --help` and every subcommand's `--help` say what each command and option is
//! for (`operator` read "The live supervisor tree. Answer the agent's…", `tree` had
//! no description, several `--json` flags none).

use std::process::Command;

use toolvisor_tests::bin;

fn help(args: &[&str]) -> String {
    let out = Command::new(bin())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `toolvisor --help` lists, with their one-line descriptions.
fn commands() -> Vec<(String, String)> {
    let text = help(&[]);
    let section = text
        .split("Commands:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .expect("a Commands section");
    section
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let (name, rest) = l.split_once(' ').unwrap_or((l, ""));
            (name != "help").then(|| (name.to_string(), rest.trim().to_string()))
        })
        .collect()
}

#[test]
fn every_command_says_what_it_is_for_in_its_own_words() {
    let commands = commands();
    assert!(commands.len() >= 10, "{commands:?}");
    for (name, about) in &commands {
        assert!(!about.is_empty(), "`toolvisor {name}` has no description");
        if name != "tree" {
            assert!(
                !about.contains("supervisor tree."),
                "`toolvisor {name}` carries another command's description: {about}"
            );
        }
    }
    let tree = &commands.iter().find(|(n, _)| n == "tree").unwrap().1;
    assert!(tree.contains("supervisor tree"), "{tree}");
    let operator = &commands.iter().find(|(n, _)| n == "operator").unwrap().1;
    assert!(operator.starts_with("Answer the agent's"), "{operator}");
}

#[test]
fn every_option_of_every_command_has_a_description() {
    for (name, _) in commands() {
        let text = help(&[name.as_str()]);
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if !t.starts_with('-') || line.len() - t.len() > 6 {
                continue;
            }
            // `  -x, --opt <V>  Description` on one line, or the description indented on the next.
            let same_line = t
                .split_once("  ")
                .is_some_and(|(_, d)| !d.trim().is_empty());
            let next_line = lines.get(i + 1).is_some_and(|n| {
                n.len() - n.trim_start().len() > line.len() - t.len() && !n.trim().is_empty()
            });
            assert!(
                same_line || next_line,
                "`toolvisor {name}`: option without a description: {line}\n{text}"
            );
        }
    }
}
