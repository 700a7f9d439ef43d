"""Where episodes execute: inline, a local fork pool, or Ray tasks on many machines."""
