//! ARCHITECTURE.md must stay the map of the code: every module of `src/` that
//! is not test-only (named by its path, `src/controller/act.rs`, a folder's
//! `mod.rs` by the folder, `src/controller/`) and every crate under `hack/`
//! (`hack/mongod-sim`) is named in it, in backticks. A module is test-only
//! when it is a `tests.rs`, sits in a `tests/` folder, its parent declares
//! it under `#[cfg(test)]`, or its parent is test-only.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as paths relative to the repository root.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(
                path.strip_prefix(root())
                    .expect("under the root")
                    .to_path_buf(),
            );
        }
    }
}

/// The files that may declare `module` (`src/a/b.rs` or `src/a/b/mod.rs`):
/// its folder's `mod.rs`, the `a.rs` beside the folder, or the crate roots.
fn declaring_files(module: &Path) -> Vec<PathBuf> {
    let folder = if module.file_name().is_some_and(|n| n == "mod.rs") {
        module.parent().and_then(Path::parent)
    } else {
        module.parent()
    }
    .expect("a module has a folder");
    if folder == Path::new("src") {
        return vec!["src/lib.rs".into(), "src/main.rs".into()];
    }
    vec![folder.join("mod.rs"), folder.with_extension("rs")]
}

/// The module's own name: `b` for `src/a/b.rs` and for `src/a/b/mod.rs`.
fn module_name(module: &Path) -> String {
    let name = if module.file_name().is_some_and(|n| n == "mod.rs") {
        module.parent().and_then(Path::file_name)
    } else {
        module.file_stem()
    };
    name.expect("a module name").to_string_lossy().into_owned()
}

/// Whether the declaration `mod <name>;` in `source` carries `#[cfg(test)]`
/// among the attributes right above it.
fn declared_for_tests(source: &str, name: &str) -> Option<bool> {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let declaration = lines.iter().position(|line| {
        let line = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        *line == format!("mod {name};")
    })?;
    let attributes = lines[..declaration]
        .iter()
        .rev()
        .take_while(|line| line.starts_with("#[") || line.starts_with("///"));
    Some(attributes.into_iter().any(|line| *line == "#[cfg(test)]"))
}

fn is_test_only(module: &Path) -> bool {
    if module.file_name().is_some_and(|n| n == "tests.rs")
        || module.components().any(|c| c.as_os_str() == "tests")
    {
        return true;
    }
    let name = module_name(module);
    let declared = declaring_files(module).into_iter().find_map(|file| {
        let source = std::fs::read_to_string(root().join(&file)).ok()?;
        Some((file, declared_for_tests(&source, &name)?))
    });
    match declared {
        Some((_, true)) => true,
        // A module inside a test-only module is test-only too.
        Some((parent, false)) => !is_crate_root(&parent) && is_test_only(&parent),
        None => false,
    }
}

fn is_crate_root(file: &Path) -> bool {
    file == Path::new("src/lib.rs") || file == Path::new("src/main.rs")
}

/// How ARCHITECTURE.md names a module: its path, or its folder's for a `mod.rs`.
fn named_as(module: &Path) -> String {
    let text = module.to_string_lossy().into_owned();
    match text.strip_suffix("mod.rs") {
        Some(folder) => folder.to_string(),
        None => text,
    }
}

#[test]
fn architecture_md_names_every_module_of_src_and_every_crate_of_hack() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut modules = Vec::new();
    rust_files(&root().join("src"), &mut modules);
    let mut names: Vec<String> = modules
        .iter()
        .filter(|module| !is_test_only(module))
        .map(|module| named_as(module))
        .collect();
    let crates = std::fs::read_dir(root().join("hack")).expect("hack/");
    for entry in crates {
        let path = entry.expect("a directory entry").path();
        if path.join("Cargo.toml").is_file() {
            let name = path.file_name().expect("a crate folder").to_string_lossy();
            names.push(format!("hack/{name}"));
        }
    }
    names.sort();
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| !map.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name (in backticks): {missing:?}"
    );
}

#[test]
fn test_only_modules_are_told_apart() {
    let source = "mod act;\n#[cfg(test)]\nmod test_cluster;\n/// Doc.\npub mod finalizer;\n";
    assert_eq!(declared_for_tests(source, "act"), Some(false));
    assert_eq!(declared_for_tests(source, "test_cluster"), Some(true));
    assert_eq!(declared_for_tests(source, "finalizer"), Some(false));
    assert_eq!(declared_for_tests(source, "absent"), None);
    assert!(is_test_only(Path::new("src/planner/tests.rs")));
    assert!(is_test_only(Path::new("src/planner/tests/initiate.rs")));
    assert!(is_test_only(Path::new(
        "src/planner/properties/checkers.rs"
    )));
    assert!(!is_test_only(Path::new("src/planner/steps.rs")));
    assert_eq!(
        named_as(Path::new("src/controller/mod.rs")),
        "src/controller/"
    );
    assert_eq!(
        named_as(Path::new("src/controller/act.rs")),
        "src/controller/act.rs"
    );
}
