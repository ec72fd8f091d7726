# Sourced by device scripts: makes `import orinkit` work from this tree on a machine that has torch but not orinkit
# installed, by linking each folder setup.cfg's package_dir maps to orinkit.<name> into a namespace under /tmp/ns
# (the list comes from setup.cfg, so a new package needs no edit here).
ns=/tmp/ns/orinkit; mkdir -p "$ns"
sed -n "/^package_dir *=/,/^[a-z_]* *=/s/^ *orinkit\.\([a-z_]*\) *= *\([a-z_][a-z_/]*\) *\$/\1 \2/p" setup.cfg | while read -r name dir; do
  ln -sfn "$PWD/$dir" "$ns/$name"; done
export PYTHONPATH=/tmp/ns:${PYTHONPATH:-} PYTHONUNBUFFERED=1
