//! Generates the protos under `proto/` twice, in local mode and in
//! dispatch mode; `extra/` with a prost-build configuration (`bytes`, type
//! attributes, an include file); `wkt/` with the well-known types compiled
//! and an extern path into the crate.

fn main() -> std::io::Result<()> {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let protos = [
        "a/common.proto",
        "b/other.proto",
        "nopkg.proto",
        "c/names.proto",
        "split/one.proto",
        "split/two.proto",
    ];
    for (dir, dispatch) in [("local", false), ("dispatch", true)] {
        let dir = out.join(dir);
        std::fs::create_dir_all(&dir)?;
        let mut builder = pajamax_build::configure().out_dir(&dir);
        if dispatch {
            builder = builder.dispatch_all();
        }
        builder.compile(&protos, &["proto"])?;
    }
    let mut config = prost_build::Config::new();
    config
        .bytes(["."])
        .type_attribute(".", "#[allow(dead_code)]")
        .include_file("extra_include.rs");
    let extra = out.join("extra");
    std::fs::create_dir_all(&extra)?;
    pajamax_build::configure()
        .out_dir(&extra)
        .prost_config(config)
        .dispatch_services(["modern.v2.Modern"])
        .compile(&["p2.proto", "p3.proto"], &["proto/extra"])?;
    let mut config = prost_build::Config::new();
    config
        .compile_well_known_types()
        .extern_path(".pkg.a_b.v1", "crate::local::pkg::a_b::v1");
    let wkt = out.join("wkt");
    std::fs::create_dir_all(&wkt)?;
    pajamax_build::configure()
        .out_dir(&wkt)
        .prost_config(config)
        .dispatch_services(["wkt.svc.Self"])
        .compile(&["wkt/svc.proto"], &["proto"])?;
    Ok(())
}
