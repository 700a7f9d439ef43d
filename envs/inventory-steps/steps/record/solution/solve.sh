#!/usr/bin/env bash
printf 'item,qty\napple,3\npear,5\n' > inventory.csv
