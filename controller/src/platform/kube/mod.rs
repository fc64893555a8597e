//! The Kubernetes platform: a sandbox's workload is a Pod named after it, its volumes are PVCs
//! `<template>-<sandbox>`, and its Service a headless Service named like it, all carrying a
//! controller ownerReference to the Sandbox and the `sandbox-name-hash` label.
