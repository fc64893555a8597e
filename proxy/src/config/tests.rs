//! Tests of config parsing and validation.
