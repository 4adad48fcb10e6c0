use super::*;

/// Enough keys that loading them back takes a while after a restart.
const KEYS: u32 = 400_000;

#[test]
fn a_restarted_server_counts_as_started_once_it_loaded_its_data() {
    let mut redis = RedisServer::builder()
        .persistence(Persistence::AofAlways)
        .start();
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'k' .. i, i) end";
    let _: () = redis.cmd(&["EVAL", fill, "0", &KEYS.to_string()]);

    redis.restart();
    // A read right after the restart: a server still loading refuses it with LOADING.
    let last: Result<String, String> = redis.try_cmd(&["GET", &format!("k{KEYS}")]);
    assert_eq!(last, Ok(KEYS.to_string()));
}
