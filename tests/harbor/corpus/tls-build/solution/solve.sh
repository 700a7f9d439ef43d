#!/bin/bash
python3 -c "import six; print(six.__version__)" > /app/version.txt
