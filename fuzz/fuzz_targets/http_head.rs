//! Fuzz target `http_head`: see `rouse_fuzz::targets::http_head`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::http_head(data));
