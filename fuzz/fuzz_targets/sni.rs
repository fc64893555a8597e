//! Fuzz target `sni`: see `rouse_fuzz::targets::sni`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::sni(data));
