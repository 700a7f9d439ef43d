#!/bin/bash
sleep 8
echo done > /app/out.txt
