//! Fuzz target `http_relay`: see `rouse_fuzz::targets::http_relay`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::http_relay(data));
