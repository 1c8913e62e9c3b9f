//! Canonical bytes and content addressing.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use synod_checkpoint::{
    from_bytes, hash, read, to_bytes, write, CheckpointError, NamedTensor, ParamSet,
};

fn set(order: &[usize]) -> ParamSet {
    let all = [
        NamedTensor {
            name: "transformer.wte.weight".into(),
            shape: vec![4, 3],
            data: (0..12).map(|i| i as f32 * 0.5).collect(),
        },
        NamedTensor {
            name: "transformer.ln_f.bias".into(),
            shape: vec![3],
            data: vec![0.0, -1.0, 2.5],
        },
        NamedTensor {
            name: "a.scalar".into(),
            shape: vec![],
            data: vec![7.0],
        },
    ];
    ParamSet::new(order.iter().map(|i| all[*i].clone()).collect()).unwrap()
}

#[test]
fn equal_parameters_give_identical_bytes_and_hash_whatever_the_insertion_order() {
    let a = to_bytes(&set(&[0, 1, 2])).unwrap();
    let b = to_bytes(&set(&[2, 0, 1])).unwrap();
    assert_eq!(a, b);
    assert_eq!(hash(&a), hash(&b));
    // Re-serializing a parsed checkpoint reproduces it byte for byte.
    assert_eq!(to_bytes(&from_bytes(&a).unwrap()).unwrap(), a);
}

#[test]
fn one_ulp_changes_the_hash() {
    let mut s = set(&[0, 1, 2]);
    let before = hash(&to_bytes(&s).unwrap());
    let t = s.data_mut().next().unwrap();
    t[0] = f32::from_bits(t[0].to_bits() + 1);
    assert_ne!(hash(&to_bytes(&s).unwrap()), before);
}

#[test]
fn write_then_read_verifies_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("round-1.safetensors");
    let h = write(&path, &set(&[0, 1, 2])).unwrap();
    assert_eq!(hash(&std::fs::read(&path).unwrap()), h);
    let (back, h2) = read(&path, Some(&h)).unwrap();
    assert_eq!(h2, h);
    assert_eq!(back, set(&[0, 1, 2]));
    let mut wrong = h;
    wrong[0] ^= 1;
    assert!(matches!(
        read(&path, Some(&wrong)),
        Err(CheckpointError::HashMismatch { .. })
    ));
}

#[test]
fn bad_input_is_a_typed_error() {
    assert!(matches!(
        from_bytes(b"not a checkpoint"),
        Err(CheckpointError::Format(_))
    ));
    let dup = vec![
        NamedTensor {
            name: "x".into(),
            shape: vec![1],
            data: vec![1.0],
        },
        NamedTensor {
            name: "x".into(),
            shape: vec![1],
            data: vec![2.0],
        },
    ];
    assert!(matches!(ParamSet::new(dup), Err(CheckpointError::Shape(_))));
    let misshaped = vec![NamedTensor {
        name: "x".into(),
        shape: vec![2],
        data: vec![1.0],
    }];
    assert!(matches!(
        ParamSet::new(misshaped),
        Err(CheckpointError::Shape(_))
    ));
}

#[test]
fn prefixed_state_splits_back_out() {
    let params = set(&[0, 1]);
    let momentum = set(&[1]);
    let mut full = params
        .clone()
        .with_prefixed("outer_momentum.", &momentum)
        .unwrap();
    assert_eq!(full.tensors().len(), 3);
    let m = full.take_prefixed("outer_momentum.");
    assert_eq!(m, momentum);
    assert_eq!(full, params);
}
