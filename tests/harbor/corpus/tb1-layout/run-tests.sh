#!/bin/bash
# TB1: exit 0 passes; the tests are in $TEST_DIR
bash $TEST_DIR/check.sh
