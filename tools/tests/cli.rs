//! The command line itself: help, usage errors (exit 2) and the error prefix.

mod common;

use common::*;
use ondisk::Compression;

#[test]
fn help_lists_every_subcommand_and_the_exit_codes() {
    let r = run_ok(["--help"]);
    for sub in ["verify", "compact", "to-rdb", "from-rdb", "stats"] {
        assert!(
            r.stdout.contains(&format!("\n  {sub} ")),
            "{sub}: {}",
            r.stdout
        );
    }
    for code in [
        "  0  success",
        "  1  bad input data",
        "  2  usage error",
        "  3  I/O error",
    ] {
        assert!(r.stdout.contains(code), "{code}: {}", r.stdout);
    }
    for (sub, flags) in [
        ("verify", &["<SUMMARY>", "--name <NAME>"][..]),
        (
            "compact",
            &[
                "--out-dir <DIR>",
                "--name <NAME>",
                "--shards <N>",
                "--compression <CODEC>",
                "--now-ms <MS>",
            ][..],
        ),
        (
            "to-rdb",
            &["--out <FILE>", "--rdb-version <V>", "[default: 10]"][..],
        ),
        (
            "from-rdb",
            &[
                "<RDB>",
                "--out-dir <DIR>",
                "[default: dump]",
                "[default: 1]",
                "[default: lz4]",
            ][..],
        ),
        ("stats", &["<SUMMARY>", "--now-ms <MS>"][..]),
    ] {
        let r = run_ok([sub, "--help"]);
        for f in flags {
            assert!(r.stdout.contains(f), "{sub} --help lacks {f}: {}", r.stdout);
        }
        assert!(r.stdout.contains("Exit codes:"), "{sub}");
    }
    let r = run_ok(["--version"]);
    assert!(r.stdout.starts_with("strata-compact "), "{r:?}");
}

#[test]
fn usage_errors_exit_2_with_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write_files(
        dir.path(),
        "dump",
        1,
        &[vec![string(0, b"a", b"b", None, 0)]],
        Compression::None,
    );
    let s = summary.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        &[][..],
        &["frobnicate"][..],
        &["verify"][..],
        &["verify", s, "--bogus"][..],
        &["compact", s][..],
        &["compact", s, "--out-dir", d, "--shards", "0"][..],
        &["compact", s, "--out-dir", d, "--shards", "many"][..],
        &["compact", s, "--out-dir", d, "--compression", "gzip"][..],
        &["compact", s, "--out-dir", d, "--now-ms", "-1"][..],
        &["compact", d, "--out-dir", d][..],
        &["compact", s, "--out-dir", d, "--name", "a/b"][..],
        &["to-rdb", s][..],
        &["from-rdb", "x.rdb"][..],
        &["from-rdb", "x.rdb", "--out-dir", d, "--name", ""][..],
        &["stats"][..],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.starts_with("strata-compact: "), "{args:?}: {r:?}");
        assert_eq!(r.stdout, "", "{args:?}");
    }
    // Nothing was written by any of them.
    assert_eq!(list(dir.path()).len(), 2);
}

#[test]
fn a_summary_not_named_like_one_needs_name_for_compact() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write_files(
        dir.path(),
        "dump",
        1,
        &[vec![string(0, b"a", b"b", None, 0)]],
        Compression::None,
    );
    let odd = dir.path().join("renamed.bin");
    std::fs::rename(&summary, &odd).unwrap();
    let out = dir.path().join("out");
    let r = run([
        "compact".as_ref(),
        odd.as_os_str(),
        "--out-dir".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("pass --name"), "{r:?}");
    let r = run_ok([
        "compact".as_ref(),
        odd.as_os_str(),
        "--out-dir".as_ref(),
        out.as_os_str(),
        "--name".as_ref(),
        "fixed".as_ref(),
    ]);
    assert_eq!(r.field("kept"), "1");
    assert!(out.join("fixed-summary.strata").exists());
}
