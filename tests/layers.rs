//! The layering rule of `src/` (docs/architecture.md): top-level modules form a stack, and no
//! module imports one above it. This test reads every source file and fails on a `crate::X`
//! (or a `super::` path reaching the crate root) that names a module higher up the stack.

use std::path::{Path, PathBuf};

/// Bottom to top. A module may import those before it, never those after it.
const LAYERS: &[&str] = &[
    "memory", "glob", "notify", "cron", "protocol", "config", "shard", "cmd", "runtime", "server",
    "net", "boot",
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|m| *m == module)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file under `src/` (`server/admin/client.rs` is
/// `[server, admin, client]`, `server/mod.rs` is `[server]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src/")
        .with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The crate-root modules a line of code names: `crate::x`, `crate::{x, y::z}`, and `super::`
/// chains long enough to leave the file's top module.
fn roots_named(code: &str, path: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // Top-level names of the group: after `{` or a `,` at depth 0.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        out.push(ident_at(&group[j..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident_at(after).to_string());
        }
        rest = after;
    }
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let mut after = &rest[i..];
        let mut ups = 0;
        while let Some(a) = after.strip_prefix("super::") {
            ups += 1;
            after = a;
        }
        if ups >= path.len() {
            out.push(ident_at(after).to_string());
        }
        rest = after;
    }
    out
}

#[test]
fn no_module_imports_one_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut seen_modules = std::collections::BTreeSet::new();
    let mut violations = Vec::new();
    for file in &files {
        let path = module_path(&src, file);
        let Some(top) = path.first() else {
            continue;
        };
        // The crate root only declares the modules; the binary sits above everything.
        if top == "lib" || top == "main" {
            continue;
        }
        seen_modules.insert(top.clone());
        let Some(own) = rank(top) else {
            violations.push(format!(
                "{}: module `{top}` is not in the layer list",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for root in roots_named(code, &path) {
                if rank(&root).is_some_and(|r| r > own) {
                    violations.push(format!(
                        "{}:{}: `{top}` imports `{root}`, which is above it",
                        file.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    // Every layer exists (a renamed module must be renamed here too).
    for m in LAYERS {
        assert!(seen_modules.contains(*m), "no module `{m}` in src/");
    }
}

#[test]
fn the_checker_sees_imports_in_every_form() {
    let at = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        roots_named("use crate::server::Core;", &at(&["cmd", "x"])),
        ["server"]
    );
    assert_eq!(
        roots_named(
            "use crate::{net::socket, shard::{a, b}, cmd};",
            &at(&["cmd"])
        ),
        ["net", "shard", "cmd"]
    );
    // `super::` from `cmd/mod.rs` is the crate root; from `cmd/keys.rs` it is `cmd`.
    assert_eq!(roots_named("use super::server;", &at(&["cmd"])), ["server"]);
    assert!(roots_named("use super::args;", &at(&["cmd", "keys"])).is_empty());
    assert_eq!(
        roots_named("super::super::net::x()", &at(&["cmd", "keys"])),
        ["net"]
    );
}
