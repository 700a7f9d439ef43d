#!/usr/bin/env bash
sed -i 's/^port = 8080$/port = 9090/' config/app.conf
sed -i 's/^debug = true$/debug = false/' config/app.conf
cat config/app.conf
