# shared by every step (Harbor copies the task-level tests/ into each step's /tests)
grade() { mkdir -p /logs/verifier; if eval "$1"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; }
