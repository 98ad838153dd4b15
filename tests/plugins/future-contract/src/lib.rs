//! Test fixture: exports `factbuoy:plugin/plugin` at version 9.0.0, which factbuoy must refuse
//! by name and version rather than with a linker error.

wit_bindgen::generate!({
    inline: "
        package factbuoy:plugin@9.0.0;

        interface plugin {
            describe: func() -> string;
        }

        world gatherer {
            export plugin;
        }
    ",
});

struct Future;

impl exports::factbuoy::plugin::plugin::Guest for Future {
    fn describe() -> String {
        "from the future".to_owned()
    }
}

export!(Future);
