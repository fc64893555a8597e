//! Fuzz target `proxy_config`: see `rouse_fuzz::targets::proxy_config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::proxy_config(data));
