#!/bin/bash
echo one > /app/list.txt
