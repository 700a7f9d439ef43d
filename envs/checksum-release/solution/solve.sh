#!/usr/bin/env bash
cd release && sha256sum payload.txt > SHA256SUMS
cd release && sha256sum -c SHA256SUMS
