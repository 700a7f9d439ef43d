#!/usr/bin/env bash
awk -F, 'NR > 1 && $4 == "yes" {print $3}' users.csv | sort > active_emails.txt
cat active_emails.txt
