use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::codec::{
    self, CLASS_IN, MAX_UDP, Query, Rcode, TYPE_A, TYPE_AAAA, Unreadable, answer, parse_query,
    parse_reply, query_message,
};
use super::*;

const WEB: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 20);

fn records() -> Arc<StaticRecords> {
    let service = |ns: &str, name: &str| (ns.to_owned(), name.to_owned());
    StaticRecords::new(HashMap::from([
        (service("default", "web"), vec![WEB]),
        (service("team-a", "headless"), Vec::new()),
        (
            service("team-a", "pods"),
            vec![Ipv4Addr::new(10, 88, 0, 7), Ipv4Addr::new(10, 88, 0, 8)],
        ),
    ]))
}

fn query(name: &str, qtype: u16) -> Query {
    parse_query(&query_message(7, name, qtype)).expect("a query")
}

#[test]
fn a_query_is_read_and_answered_with_its_question() {
    let q = query("Web.Default.SVC.cluster.local.", TYPE_A);
    assert_eq!(q.id, 7);
    assert!(q.recursion_desired);
    assert_eq!(q.labels, ["web", "default", "svc", "cluster", "local"]);
    assert_eq!((q.qtype, q.qclass), (TYPE_A, CLASS_IN));
    let bytes = answer(&q, Rcode::NoError, &[WEB], 5, MAX_UDP);
    let reply = parse_reply(&bytes).expect("an answer");
    assert_eq!(
        reply,
        codec::Reply {
            id: 7,
            rcode: Rcode::NoError,
            authoritative: true,
            truncated: false,
            addresses: vec![(WEB, 5)],
        }
    );
    // The question is echoed as sent (case kept), right after the header.
    let sent = query_message(7, "Web.Default.SVC.cluster.local.", TYPE_A);
    assert_eq!(bytes[12..sent.len()], sent[12..]);
}

#[test]
fn too_many_addresses_for_udp_set_the_truncation_bit() {
    let q = query("pods.team-a.svc.cluster.local", TYPE_A);
    let many: Vec<Ipv4Addr> = (0..100).map(|i| Ipv4Addr::new(10, 88, 1, i)).collect();
    let bytes = answer(&q, Rcode::NoError, &many, 5, MAX_UDP);
    assert!(bytes.len() <= MAX_UDP);
    let reply = parse_reply(&bytes).expect("an answer");
    assert!(reply.truncated);
    assert!(!reply.addresses.is_empty() && reply.addresses.len() < 100);
    let bytes = answer(&q, Rcode::NoError, &many, 5, codec::MAX_TCP);
    let reply = parse_reply(&bytes).expect("an answer");
    assert!(!reply.truncated);
    assert_eq!(reply.addresses.len(), 100);
}

#[test]
fn unreadable_messages_are_dropped_or_refused_with_a_code() {
    let good = query_message(9, "web.default.svc.cluster.local", TYPE_A);
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut m = good.clone();
        f(&mut m);
        parse_query(&m)
    };
    let reply = |rcode| {
        Err(Unreadable::Reply {
            id: 9,
            recursion_desired: true,
            rcode,
        })
    };
    assert_eq!(parse_query(&good[..11]), Err(Unreadable::Drop), "short");
    assert_eq!(with(&|m| m[2] |= 0x80), Err(Unreadable::Drop), "a response");
    assert_eq!(
        with(&|m| m[2] |= 2 << 3),
        reply(Rcode::NotImp),
        "opcode STATUS"
    );
    assert_eq!(with(&|m| m[5] = 2), reply(Rcode::FormErr), "two questions");
    assert_eq!(with(&|m| m[7] = 1), reply(Rcode::FormErr), "an answer");
    assert_eq!(with(&|m| m[12] = 0xc0), reply(Rcode::FormErr), "a pointer");
    assert_eq!(
        with(&|m| m[12] = 60),
        reply(Rcode::FormErr),
        "label past the end"
    );
    assert_eq!(
        with(&|m| m.truncate(m.len() - 2)),
        reply(Rcode::FormErr),
        "no class"
    );
    let long = vec!["a".repeat(63); 5].join(".");
    let long = query_message(9, &long, TYPE_A);
    assert_eq!(parse_query(&long), reply(Rcode::FormErr), "name over 255");
    // An EDNS OPT record in the additional section is ignored.
    let mut edns = good.clone();
    edns[11] = 1;
    edns.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(parse_query(&edns).map(|q| q.labels.len()), Ok(5));
    let bytes = codec::error_reply(9, true, Rcode::FormErr);
    assert_eq!(parse_reply(&bytes).map(|r| r.rcode), Some(Rcode::FormErr));
}

#[test]
fn names_resolve_by_their_shape() {
    struct Case {
        name: &'static str,
        qtype: u16,
        want: (Rcode, Vec<Ipv4Addr>),
    }
    let ok = |a: &[Ipv4Addr]| (Rcode::NoError, a.to_vec());
    let cases = [
        Case {
            name: "web.default.svc.cluster.local",
            qtype: TYPE_A,
            want: ok(&[WEB]),
        },
        Case {
            name: "WEB.default.svc.Cluster.Local",
            qtype: TYPE_A,
            want: ok(&[WEB]),
        },
        Case {
            name: "web.default.svc.cluster.local",
            qtype: TYPE_AAAA,
            want: ok(&[]),
        },
        Case {
            name: "headless.team-a.svc.cluster.local",
            qtype: TYPE_A,
            want: ok(&[]),
        },
        Case {
            name: "pods.team-a.svc.cluster.local",
            qtype: TYPE_A,
            want: ok(&[Ipv4Addr::new(10, 88, 0, 7), Ipv4Addr::new(10, 88, 0, 8)]),
        },
        Case {
            name: "web.team-a.svc.cluster.local",
            qtype: TYPE_A,
            want: (Rcode::NxDomain, vec![]),
        },
        Case {
            name: "10-88-0-9.team-a.pod.cluster.local",
            qtype: TYPE_A,
            want: ok(&[Ipv4Addr::new(10, 88, 0, 9)]),
        },
        Case {
            name: "10-88-0-9.team-a.pod.cluster.local",
            qtype: TYPE_AAAA,
            want: ok(&[]),
        },
        Case {
            name: "10-88-0.team-a.pod.cluster.local",
            qtype: TYPE_A,
            want: (Rcode::NxDomain, vec![]),
        },
        // What ndots:5 and the search list make of a full name first.
        Case {
            name: "web.default.svc.cluster.local.default.svc.cluster.local",
            qtype: TYPE_A,
            want: (Rcode::NxDomain, vec![]),
        },
        Case {
            name: "default.svc.cluster.local",
            qtype: TYPE_A,
            want: (Rcode::NxDomain, vec![]),
        },
        Case {
            name: "cluster.local",
            qtype: TYPE_A,
            want: (Rcode::NxDomain, vec![]),
        },
        Case {
            name: "local",
            qtype: TYPE_A,
            want: (Rcode::Refused, vec![]),
        },
        Case {
            name: "example.com",
            qtype: TYPE_A,
            want: (Rcode::Refused, vec![]),
        },
        Case {
            name: "web.default.svc.cluster.localx",
            qtype: TYPE_A,
            want: (Rcode::Refused, vec![]),
        },
    ];
    for case in cases {
        let got = resolve(
            &query(case.name, case.qtype),
            records().as_ref(),
            "cluster.local",
        );
        assert_eq!(got, case.want, "{} type {}", case.name, case.qtype);
    }
    let mut chaos = query("web.default.svc.cluster.local", TYPE_A);
    chaos.qclass = 3;
    assert_eq!(
        resolve(&chaos, records().as_ref(), "cluster.local").0,
        Rcode::Refused
    );
}

/// Records that have not loaded yet.
struct Loading;

impl Records for Loading {
    fn ready(&self) -> bool {
        false
    }
    fn service(&self, _: &str, _: &str) -> Option<Vec<Ipv4Addr>> {
        None
    }
}

#[test]
fn services_get_servfail_until_the_records_are_loaded() {
    let service = query("web.default.svc.cluster.local", TYPE_A);
    assert_eq!(
        resolve(&service, &Loading, "cluster.local").0,
        Rcode::ServFail
    );
    // Pod names need no records; other names are refused as before.
    let pod = query("10-88-0-9.x.pod.cluster.local", TYPE_A);
    assert_eq!(resolve(&pod, &Loading, "cluster.local").0, Rcode::NoError);
    let outside = query("example.com", TYPE_A);
    assert_eq!(
        resolve(&outside, &Loading, "cluster.local").0,
        Rcode::Refused
    );
}

fn start(config: DnsConfig) -> DnsServer {
    let (udp, tcp) = DnsServer::bind("127.0.0.1:0".parse().expect("address")).expect("bind");
    DnsServer::start(udp, tcp, records(), config).expect("start")
}

async fn ask_udp(server: &DnsServer, socket: &tokio::net::UdpSocket, message: &[u8]) -> Vec<u8> {
    socket
        .send_to(message, server.local_addr())
        .await
        .expect("send");
    let mut buffer = [0u8; MAX_UDP];
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buffer))
        .await
        .expect("an answer within 5 s")
        .expect("receive");
    buffer[..len].to_vec()
}

#[tokio::test]
async fn the_server_answers_over_udp_and_tcp_and_survives_garbage() {
    let server = start(DnsConfig::default());
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    // Garbage first: dropped, and the next query is still answered.
    socket
        .send_to(b"junk", server.local_addr())
        .await
        .expect("send");
    let answer = ask_udp(
        &server,
        &socket,
        &query_message(1, "web.default.svc.cluster.local", TYPE_A),
    )
    .await;
    let reply = parse_reply(&answer).expect("a reply");
    assert_eq!(
        (reply.id, reply.rcode, reply.addresses),
        (1, Rcode::NoError, vec![(WEB, 5)])
    );
    let answer = ask_udp(
        &server,
        &socket,
        &query_message(2, "nope.default.svc.cluster.local", TYPE_A),
    )
    .await;
    assert_eq!(parse_reply(&answer).map(|r| r.rcode), Some(Rcode::NxDomain));

    // TCP: two length-prefixed queries on one connection.
    let mut stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    for (id, name) in [(3, "web.default.svc.cluster.local"), (4, "example.com")] {
        let message = query_message(id, name, TYPE_A);
        let len = u16::try_from(message.len()).expect("small").to_be_bytes();
        stream.write_all(&len).await.expect("write");
        stream.write_all(&message).await.expect("write");
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.expect("length");
        let mut body = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut body).await.expect("body");
        let reply = parse_reply(&body).expect("a reply");
        assert_eq!(reply.id, id);
    }
    let counts = server.counts();
    assert_eq!(
        (
            counts.no_error,
            counts.nx_domain,
            counts.refused,
            counts.dropped
        ),
        (2, 1, 1, 1),
        "{counts:?}"
    );
    server.stop().await;
}

/// Reads until the server closes the connection; fails if it does not within 5 s.
async fn closed_by_server(stream: &mut tokio::net::TcpStream) {
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
        .await
        .expect("closed within 5 s");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn tcp_connections_are_bounded_in_number_and_time() {
    let server = start(DnsConfig {
        tcp_connections: 1,
        tcp_deadline: Duration::from_millis(300),
        ..DnsConfig::default()
    });
    let mut idle = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    // Accepted in connection order: the first is held, the second over the limit is closed.
    let mut second = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    closed_by_server(&mut second).await;
    assert_eq!(server.counts().tcp_shed, 1);
    // The idle one is closed at its deadline; UDP was served meanwhile.
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let answer = ask_udp(
        &server,
        &socket,
        &query_message(5, "web.default.svc.cluster.local", TYPE_A),
    )
    .await;
    assert_eq!(parse_reply(&answer).map(|r| r.rcode), Some(Rcode::NoError));
    closed_by_server(&mut idle).await;
    assert_eq!(server.counts().tcp_timeouts, 1);
    // A message over the bound ends the connection without an answer.
    let mut big = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .expect("connect");
    big.write_all(&u16::MAX.to_be_bytes()).await.expect("write");
    closed_by_server(&mut big).await;
    server.stop().await;
}
