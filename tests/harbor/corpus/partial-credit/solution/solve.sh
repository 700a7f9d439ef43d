#!/bin/bash
# the reference solution earns partial credit: three of the four files
touch /app/a /app/b /app/c
