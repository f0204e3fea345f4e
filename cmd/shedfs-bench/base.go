package main

// shedfsBinOf is the shedfs binary target name runs: -shedfs-base for
// "shedfs-base" and "shedfs-etcd-base", so that two builds are compared in
// the same run on the same noisy machine, else -shedfs.
func (b *bench) shedfsBinOf(name string) string {
	if name == "shedfs-base" || name == "shedfs-etcd-base" {
		return b.cfg.shedfsBase
	}
	return b.cfg.shedfsBin
}
