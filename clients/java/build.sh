#!/usr/bin/env bash
# Builds the Java client and its example worker, offline, from Debian 12's
# packages (debian-packages.txt; .mvn/maven.config points Maven at Debian's
# repository, /usr/share/maven-repo).
set -euo pipefail
cd "$(dirname "$0")"

missing=()
while read -r package; do
    [ -n "$package" ] || continue
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done < debian-packages.txt
if [ "${#missing[@]}" -gt 0 ]; then
    echo "build.sh: missing Debian packages: ${missing[*]} (apt-get install them)" >&2
    exit 1
fi

mvn --batch-mode --quiet -Dstyle.color=never -DskipTests package
echo "built target/assignd-client-0.1.0.jar (run the worker with ./worker)"
