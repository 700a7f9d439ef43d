#!/bin/bash
# at run time (not in the image): every candidate name points at this container, the blocked ones
# at 127.0.0.1, the others at 127.0.0.2; one local server answers both by the name asked for
while read -r name; do
  if grep -qx "$name" /srv/blocked.txt; then echo "127.0.0.1 $name"; else echo "127.0.0.2 $name"; fi
done < /srv/candidates.txt >> /etc/hosts
python3 /usr/local/bin/block-page.py > /tmp/block-page.log 2>&1 &
exec "$@"
