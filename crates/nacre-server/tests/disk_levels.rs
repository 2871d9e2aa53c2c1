//! nacre-server with disk levels: more data than the pool holds, written through a real
//! client, survives SIGKILL and restart, and INFO reports the spills.

mod common;

use common::Server;

fn info_field(info: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from INFO: {info}"))
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i:08}-").into_bytes();
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < 4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

#[test]
fn data_larger_than_the_pool_spills_to_disk_and_survives_sigkill() {
    let disk = tempfile::tempdir().expect("disk dir");
    let disk_dir = disk.path().join("levels");
    let disk_arg = disk_dir.to_str().expect("utf8").to_string();
    let mut s = Server::start(&[
        "--pmem-size",
        "64mb",
        "--disk-dir",
        &disk_arg,
        "--gi-size-limit",
        "8mb",
    ]);
    let n = 40_000u64; // 160 MiB of values against a 64 MiB pool
    {
        let mut c = s.conn();
        for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
            let mut p = redis::pipe();
            for &i in chunk {
                p.cmd("SET")
                    .arg(format!("key:{i:08}"))
                    .arg(value(i))
                    .ignore();
            }
            let () = p.query(&mut c).expect("pipeline");
        }
        let info: String = redis::cmd("INFO").arg("nacre").query(&mut c).expect("info");
        assert!(info_field(&info, "disk_spills") > 0, "{info}");
        assert!(info_field(&info, "disk_bytes") > 64 << 20, "{info}");
        let dir: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("disk-dir")
            .query(&mut c)
            .expect("config get");
        assert_eq!(dir, vec!["disk-dir".to_string(), disk_arg.clone()]);
    }
    s.kill();
    s.restart();
    let mut c = s.conn();
    for i in (0..n).step_by(97) {
        let v: Vec<u8> = redis::cmd("GET")
            .arg(format!("key:{i:08}"))
            .query(&mut c)
            .expect("get");
        assert!(v == value(i), "key {i} after restart");
    }
    let size: u64 = redis::cmd("DBSIZE").query(&mut c).expect("dbsize");
    assert_eq!(size, n);
}
