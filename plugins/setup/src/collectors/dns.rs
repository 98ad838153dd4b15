//! `dns`: `/etc/resolv.conf` as Ansible reads it (each `search`, `sortlist` or `options` line
//! replaces the previous one; name servers accumulate).

use factbuoy_guest::linux::resolv_conf;
use serde_json::{Map, Value};

use crate::ctx::Ctx;

pub fn collect(ctx: &mut Ctx) {
    let text = ctx.read_raw("/etc/resolv.conf").unwrap_or_default();
    let mut dns = Map::new();
    for (keyword, args) in resolv_conf::directives(&text) {
        match keyword.as_str() {
            "nameserver" => {
                let servers = dns
                    .entry("nameservers")
                    .or_insert_with(|| Value::Array(vec![]));
                if let Value::Array(list) = servers {
                    list.extend(args.into_iter().map(Value::from));
                }
            }
            "domain" => {
                if let Some(domain) = args.into_iter().next() {
                    dns.insert("domain".into(), domain.into());
                }
            }
            "search" | "sortlist" => {
                dns.insert(keyword, args.into_iter().map(Value::from).collect());
            }
            "options" => {
                let options: Map<String, Value> = args
                    .into_iter()
                    .map(|option| match option.split_once(':') {
                        Some((name, value)) if !value.is_empty() => (name.to_owned(), value.into()),
                        Some((name, _)) => (name.to_owned(), true.into()),
                        None => (option, true.into()),
                    })
                    .collect();
                dns.insert("options".into(), options.into());
            }
            _ => {}
        }
    }
    ctx.set("dns", dns);
}
