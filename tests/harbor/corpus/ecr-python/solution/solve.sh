#!/bin/bash
printf 'def greet(name):\n    return f"hello, {name}"\n' > /app/greet.py
