//! Table tests of the Sandbox → route state mapping.
