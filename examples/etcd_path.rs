//! Prints the path of the etcd binary vendored by the `etcd-bin-vendored` crate
//! (used by `hack/control-plane.sh` and `hack/test.sh`).

fn main() -> std::process::ExitCode {
    match etcd_bin_vendored::etcd_bin_path() {
        Ok(path) => {
            println!("{}", path.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("no vendored etcd for this platform: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
