"""Moving cassettes in and out of a store: bundles (export, read/verify, import),
vcrpy YAML export, and removal (`cassettes rm`/`gc`). See README.md."""
