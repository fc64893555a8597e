//! Fuzz target `rest_body`: see `rouse_fuzz::targets::rest_body`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::rest_body(data));
