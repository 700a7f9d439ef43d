#!/usr/bin/env bash
mkdir -p notes data
mv inbox/*.txt notes/
mv inbox/*.csv data/
