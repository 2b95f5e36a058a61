fn main() -> Result<(), Box<dyn std::error::Error>> {
    pajamax_build::compile_protos_in_local(&["../scenarios/complex_proto/helloworld.proto"], &["../scenarios/complex_proto"])?;
    Ok(())
}
