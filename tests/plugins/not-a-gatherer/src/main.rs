//! Test fixture: a plain WASI command, a component of the wrong world for factbuoy.

fn main() {
    println!("I am a command, not a gatherer");
}
