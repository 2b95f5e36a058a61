//! Generates `routeguide` in local mode and `feed` in dispatch mode.

fn main() -> std::io::Result<()> {
    // Run again for every test run, so that its warnings show each time.
    println!("cargo:rerun-if-env-changed=PAJAMAX_BUILD_TEST_RUN");
    pajamax_build::configure()
        .dispatch_services(["feed.Feed", "feed.Uploads", "feed.Idle"])
        .compile(&["routeguide.proto", "feed.proto"], &["proto"])
}
