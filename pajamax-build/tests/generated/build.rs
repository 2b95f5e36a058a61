//! Generates `routeguide` in local mode, `feed` in dispatch mode and
//! `names` in both.

fn main() -> std::io::Result<()> {
    // Run again for every test run, so that its warnings show each time.
    println!("cargo:rerun-if-env-changed=PAJAMAX_BUILD_TEST_RUN");
    pajamax_build::configure()
        .dispatch_services(["feed.Feed", "feed.Uploads", "feed.Idle", "feed.Items", "names.Sync", "names.Self"])
        .compile(&["routeguide.proto", "feed.proto", "names.proto"], &["proto"])
}
