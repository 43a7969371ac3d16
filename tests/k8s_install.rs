//! The install path end to end, as a user runs it (issue 17.7): Metacontroller in
//! the cluster from its production manifests, then exactly the README's install
//! commands (the token and TLS Secrets, `kubectl apply -k metacontroller/`, which
//! serves HTTPS only), the example `MySQL` Running on real MariaDB pods, an
//! application pod connected through `-primary` and `-replicas` with the generated
//! application users, and the volumes grown.
//!
//! Runs `python3 tests/k8s/install.py`: a real node (kubelet, containerd, CoreDNS,
//! kube-proxy) as for the real-server loop, the hook's image built from the
//! Dockerfile (`tests/image/build.sh`), Metacontroller's image from its source
//! tree. Skips (passes) where a real node cannot run, unless
//! `MYSQL_HOOK_REQUIRE_REAL_SERVERS=1` (what `.ci/run` sets).

use std::path::Path;
use std::process::Command;

#[test]
fn the_readme_install_runs_an_application_on_real_servers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg("tests/k8s/install.py")
        .current_dir(root)
        .status()
        .unwrap_or_else(|err| panic!("could not run python3 tests/k8s/install.py: {err}"));
    assert!(
        status.success(),
        "tests/k8s/install.py failed ({status}); the lines above show each README command's output, \
         and on failure the pods, events and the Metacontroller, hook and server logs"
    );
}
