//! Fuzz target `manifest`: see `rouse_fuzz::targets::manifest`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::manifest(data));
