fn main() {
    println!("I am a wasi:cli command, not an mlrb agent");
}
