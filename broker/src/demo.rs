pub fn run() -> Result<(), String> { Err("x".into()) }
