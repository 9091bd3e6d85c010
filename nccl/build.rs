// The shared object answers to NCCL's soname, so programs linked against NVIDIA's libnccl.so.2
// load it unchanged (LD_LIBRARY_PATH, LD_PRELOAD).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
}
