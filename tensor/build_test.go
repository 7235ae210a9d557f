package tensor

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestConstructorsAndViews(t *testing.T) {
	i32, err := FromInt32s("a", []int64{2, 2}, []int32{1, -2, 3, math.MaxInt32})
	if err != nil || i32.Validate() != nil {
		t.Fatal(err)
	}
	if v, _ := i32.Int32s(); !reflect.DeepEqual(v, []int32{1, -2, 3, math.MaxInt32}) {
		t.Fatalf("Int32s %v", v)
	}
	if i32.Data[4] != 0xfe || i32.Data[5] != 0xff { // little-endian -2
		t.Fatalf("not little-endian: %x", i32.Data)
	}
	if _, err := FromInt32s("a", []int64{3}, []int32{1, 2}); err == nil {
		t.Fatal("shape mismatch accepted")
	}
	if _, err := i32.Float32s(); err == nil || !strings.Contains(err.Error(), "want float32") {
		t.Fatalf("wrong dtype view: %v", err)
	}
	i64, _ := FromInt64s("b", nil, []int64{math.MinInt64, 5})
	if v, _ := i64.Int64s(); !reflect.DeepEqual(v, []int64{math.MinInt64, 5}) || !reflect.DeepEqual(i64.Shape, []int64{2}) {
		t.Fatalf("Int64s %v %v", v, i64.Shape)
	}
	f32, _ := FromFloat32s("c", nil, []float32{1.5, -0})
	if v, _ := f32.Float32s(); v[0] != 1.5 {
		t.Fatal(v)
	}
	f64, _ := FromFloat64s("d", []int64{}, []float64{math.Pi})
	if v, _ := f64.Float64s(); v[0] != math.Pi || f64.NumValues() != 1 {
		t.Fatal(v)
	}
	// An unaligned buffer gives a copy with the same values.
	buf := make([]byte, 9)
	copy(buf[1:], i64.Data[8:])
	un := Tensor{Name: "u", DType: Int64, Shape: []int64{1}, Data: buf[1:]}
	if v, _ := un.Int64s(); v[0] != 5 {
		t.Fatalf("unaligned view %v", v)
	}
	u8, _ := FromUint8s("e", nil, []uint8{1, 2})
	if v, _ := u8.Uint8s(); !reflect.DeepEqual(v, []uint8{1, 2}) {
		t.Fatal(v)
	}
	for _, s := range []Tensor{ScalarInt64("x", -7), ScalarInt32("x", -7), ScalarBool("x", true), ScalarFloat32("x", 2), ScalarFloat64("x", 2)} {
		if err := s.Validate(); err != nil || s.Shape != nil {
			t.Fatalf("%+v: %v", s, err)
		}
	}
	s32 := ScalarInt32("x", -7)
	if v, _ := s32.Int64Value(); v != -7 {
		t.Fatal(v)
	}
	sf := ScalarFloat32("x", 1)
	if _, err := sf.Int64Value(); err == nil {
		t.Fatal("Int64Value of a float")
	}
	bv := BytesVector("w", [][]byte{[]byte("ab"), nil, []byte("c")})
	if err := bv.Validate(); err != nil || string(bv.Entry(2)) != "c" || bv.Len() != 3 {
		t.Fatalf("%+v %v", bv, err)
	}
	if bs := BytesScalar("s", []byte("hello")); bs.Validate() != nil || bs.Len() != 5 {
		t.Fatal("BytesScalar")
	}
}

func TestElementSetClone(t *testing.T) {
	e := Element{Tensors: []Tensor{ScalarInt64("a", 1), ScalarInt64("b", 2)}}
	c := e.Clone()
	e.Set(ScalarInt64("a", 9))
	e.Set(ScalarInt64("z", 3))
	if len(e.Tensors) != 3 || e.Tensors[0].Name != "a" || e.Tensors[2].Name != "z" {
		t.Fatalf("Set: %+v", e.Tensors)
	}
	if v, _ := e.Tensors[0].Int64Value(); v != 9 {
		t.Fatal(v)
	}
	if v, _ := c.Tensors[0].Int64Value(); v != 1 || len(c.Tensors) != 2 {
		t.Fatal("Clone shares data")
	}
}

func TestFloat16(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {1e6, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {5.960464477539063e-08, 0x0001}, {6.103515625e-05, 0x0400},
		{0.333251953125, 0x3555}, {1.0009765625, 0x3c01},
	}
	for _, c := range cases {
		if got := Float32ToFloat16(c.f); got != c.h {
			t.Errorf("Float32ToFloat16(%v) = %#x, want %#x", c.f, got, c.h)
		}
		if c.h != 0x7c00 || c.f == float32(math.Inf(1)) {
			if back := Float16ToFloat32(c.h); back != c.f && !(c.f == 1e6) {
				t.Errorf("Float16ToFloat32(%#x) = %v, want %v", c.h, back, c.f)
			}
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN -> %#x", h)
	}
	// Every finite half value round-trips.
	for h := 0; h < 0x10000; h++ {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := Float32ToFloat16(Float16ToFloat32(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#x -> %#x", h, got)
		}
	}
	if BFloat16ToFloat32(Float32ToBFloat16(3.140625)) != 3.140625 || Float32ToBFloat16(1) != 0x3f80 {
		t.Error("bfloat16")
	}
}

func TestCast(t *testing.T) {
	src, _ := FromInt64s("x", nil, []int64{-300, -1, 0, 1, 300, math.MaxInt64})
	cases := []struct {
		to   DType
		want []float64
	}{
		{Uint8, []float64{0, 0, 0, 1, 255, 255}},
		{Int8, []float64{-128, -1, 0, 1, 127, 127}},
		{Int32, []float64{-300, -1, 0, 1, 300, math.MaxInt32}},
		{Bool, []float64{1, 1, 0, 1, 1, 1}},
		{Float32, []float64{-300, -1, 0, 1, 300, float64(float32(math.MaxInt64))}},
		{Float16, []float64{-300, -1, 0, 1, 300, math.Inf(1)}},
	}
	for _, c := range cases {
		out, err := Cast(src, c.to)
		if err != nil || out.Validate() != nil || out.DType != c.to {
			t.Fatalf("%s: %v", c.to, err)
		}
		for i, w := range c.want {
			if got := out.Float64At(i); got != w {
				t.Errorf("int64 -> %s [%d] = %v, want %v", c.to, i, got, w)
			}
		}
	}
	big, _ := FromInt64s("x", nil, []int64{1<<53 + 1})
	if out, _ := Cast(big, Int64); out.Data[0] != 1 {
		t.Error("int64 identity cast lost precision")
	}
	fl, _ := FromFloat64s("f", nil, []float64{math.NaN(), -0.9, 1e300})
	out, _ := Cast(fl, Int32)
	if v, _ := out.Int32s(); !reflect.DeepEqual(v, []int32{0, 0, math.MaxInt32}) {
		t.Errorf("float64 -> int32 %v", v)
	}
	if _, err := Cast(BytesScalar("b", nil), Int32); err == nil {
		t.Error("bytes cast accepted")
	}
	if _, err := Cast(src, Bytes); err == nil {
		t.Error("cast to bytes accepted")
	}
}
