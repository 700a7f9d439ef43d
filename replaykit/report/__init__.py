"""See a store: transcripts, episode diffs, the HTML report, the determinism probe, Inspect AI logs."""
