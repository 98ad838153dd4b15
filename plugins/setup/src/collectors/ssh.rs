//! `ssh_pub_keys`: the host's SSH public keys.

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    for dir in ["/etc/ssh", "/etc/openssh", "/etc"] {
        for algorithm in ["dsa", "rsa", "ecdsa", "ed25519"] {
            let fact = format!("ssh_host_key_{algorithm}_public");
            // Ansible stops at the first directory that repeats a key it already has.
            if ctx.facts.contains_key(&fact) {
                return;
            }
            let Some(data) = ctx.read(&format!("{dir}/ssh_host_{algorithm}_key.pub")) else {
                continue;
            };
            let mut words = data.split_whitespace();
            if let (Some(kind), Some(key)) = (words.next(), words.next()) {
                let (kind, key) = (kind.to_owned(), key.to_owned());
                ctx.set(fact.clone(), key);
                ctx.set(format!("{fact}_keytype"), kind);
            }
        }
    }
}
