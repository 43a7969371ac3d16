//! The committed CRD is exactly what the Rust types generate.

#[test]
fn committed_crd_matches_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/metacontroller/crd.yaml");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = mysql_hook::crd_yaml().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        committed == generated,
        "metacontroller/crd.yaml is stale: run `cargo run -- crd > metacontroller/crd.yaml` and commit it"
    );
}

#[test]
fn crd_is_structural_and_has_the_status_subresource() {
    let yaml = mysql_hook::crd_yaml().unwrap_or_else(|e| panic!("{e}"));
    let text = yaml.as_str();
    // No leftovers of raw JSON Schema that a structural schema forbids.
    for forbidden in ["$ref", "$defs", "anyOf", "oneOf", "\"null\""] {
        assert!(!text.contains(forbidden), "the CRD contains {forbidden}");
    }
    assert!(text.contains("subresources:\n      status: {}"), "status subresource missing");
}
