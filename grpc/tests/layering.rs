//! No import cycle between this crate's modules (the check is
//! `a2a_testkit::layering`, which names each cycle's edges).

#[test]
fn the_modules_import_one_another_without_a_cycle() {
    a2a_testkit::layering::assert_no_import_cycle(env!("CARGO_MANIFEST_DIR"));
}
